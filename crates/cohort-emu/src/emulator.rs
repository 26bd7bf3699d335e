//! The real-time driver: the [`Fabric`] (the very same channel models the simulator runs)
//! between `AF_PACKET` sockets, on the monotonic clock.
//!
//! One thread waits in `epoll` on the sockets and a `timerfd` armed for the fabric's next
//! deadline (the `timerfd` has the kernel's high-resolution timers; epoll's own timeout, and
//! tokio's timer wheel, tick in milliseconds). Within [`EmuOptions::spin_us`] of a deadline it
//! stops sleeping and polls, which trades a little CPU for wake-up precision. Every frame is
//! stamped with the time it was read; how late each delivery leaves compared with the time the
//! model chose is recorded ([`EmuStatus::late_us_p99`]) so a run can show the emulator's own
//! error. Optionally the thread runs SCHED_FIFO so that other work on the machine cannot delay
//! it.
//!
//! A robot's computer is never idle, and on a virtual machine the host also takes time. For
//! that the emulator has a busy-polling mode ([`EmuOptions::busy_poll`]): it never blocks in
//! the kernel, reading its sockets and the clock in a loop, so neither a sleep's wake-up nor a
//! halted virtual CPU's return stands between a deadline and the delivery. A SCHED_FIFO thread
//! that never sleeps would be stopped by the kernel's real-time throttle (95% of each second by
//! default, then 50 ms of nothing), so the loop rests [`BUSY_REST`] in every [`BUSY_EVERY`],
//! and only where no deadline falls. It can be pinned to one CPU ([`EmuOptions::cpu`]) and lock
//! its memory ([`EmuOptions::lock_memory`]) so that no page fault stalls a delivery. The status
//! reports the share of time the hypervisor stole ([`EmuStatus::steal_share`]), which no mode
//! can win back.

use crate::cpustat::CpuTimes;
use crate::fabric::{Fabric, FabricStatus, Refused};
use crate::packet::PacketSocket;
use cohort_net::preempt::CardBoard;
use cohort_net::timer::TimerFd;
use cohort_time::Instant;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Largest frame read; longer ones (which offloads would produce) are counted and dropped.
const FRAME_BUF: usize = 65_536;
/// At most this many frames are read from one socket before deliveries get a turn.
const RX_BATCH: usize = 64;
/// Lateness histogram: 1 µs buckets up to 10 ms, the last bucket holding everything later.
const LATE_BUCKETS: usize = 10_001;
/// Busy polling rests this long ...
pub const BUSY_REST: Duration = Duration::from_micros(100);
/// ... at least this often where no deadline falls, and in any case every 1.5 of it, which
/// keeps a SCHED_FIFO thread at 90-94% of its CPU, under the kernel's default real-time
/// throttle (`sched_rt_runtime_us` 950 000 of 1 000 000).
pub const BUSY_EVERY: Duration = Duration::from_millis(1);

/// How the emulator runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmuOptions {
    /// Poll instead of sleeping within this many microseconds of a deadline.
    pub spin_us: u64,
    /// SCHED_FIFO priority for the emulator thread (1-99); `None`: the default scheduler.
    pub rt_priority: Option<i32>,
    /// Never block in the kernel: poll sockets and clock in a loop (resting [`BUSY_REST`] per
    /// [`BUSY_EVERY`] where no deadline falls). Costs most of one CPU.
    pub busy_poll: bool,
    /// Run the emulator thread on this CPU only.
    pub cpu: Option<usize>,
    /// Lock the process's memory (`mlockall`), so that no page fault stalls a delivery.
    pub lock_memory: bool,
    /// How often the status callback runs.
    pub status_every: Duration,
    /// Writes one JSON line per frame in, out and refused.
    pub frame_log: Option<PathBuf>,
    /// Publishes what every station's card holds here (Wi-Fi only; see
    /// [`cohort_net::preempt::card`]): the completion feedback a robot's agent reads.
    pub card_file: Option<PathBuf>,
}

impl Default for EmuOptions {
    fn default() -> Self {
        EmuOptions {
            spin_us: 60,
            rt_priority: Some(50),
            busy_poll: false,
            cpu: None,
            lock_memory: false,
            status_every: Duration::from_millis(250),
            frame_log: None,
            card_file: None,
        }
    }
}

/// The emulator's state as reported to `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmuStatus {
    pub uptime_s: f64,
    /// Whether the thread got its real-time priority.
    pub realtime: bool,
    pub fabric: FabricStatus,
    /// Frames longer than the read buffer.
    pub oversize: u64,
    pub send_errors: u64,
    pub recv_errors: u64,
    /// How late deliveries left, versus the model's time (µs, 1 µs resolution; 10 000
    /// stands for "10 ms or later"), since the start.
    pub late_us_p50: f64,
    pub late_us_p99: f64,
    pub late_us_max: f64,
    /// Share of the time since the start that the hypervisor took from the emulator's CPU
    /// (all CPUs when it is not pinned): guest steal time from `/proc/stat`.
    #[serde(default)]
    pub steal_share: f64,
    /// Whether the emulator busy-polls, which CPU it is pinned to, and whether its memory is
    /// locked (each as it really came out, not as asked).
    #[serde(default)]
    pub busy_poll: bool,
    #[serde(default)]
    pub cpu: Option<usize>,
    #[serde(default)]
    pub memory_locked: bool,
}

/// How the owner steers a running emulator.
#[derive(Debug, Default)]
pub struct Control {
    /// Set to end [`Emulator::run`].
    pub stop: AtomicBool,
    /// Set to have the status published at once (it is cleared when done).
    pub want_status: AtomicBool,
    /// Traces for point-to-point links to start playing now, `(link, trace)`; the flag
    /// says some wait (see [`Control::play`]).
    pub traces: std::sync::Mutex<Vec<(usize, cohort_medium::trace::Trace)>>,
    pub traces_waiting: AtomicBool,
}

impl Control {
    /// Has link `link` start following `trace` at the emulator's next turn (within
    /// microseconds while it runs).
    pub fn play(&self, link: usize, trace: cohort_medium::trace::Trace) {
        self.traces.lock().unwrap_or_else(|e| e.into_inner()).push((link, trace));
        self.traces_waiting.store(true, Ordering::Release);
    }
}

/// The fabric and its sockets (port `i` of the fabric is socket `i`).
pub struct Emulator {
    fabric: Fabric,
    sockets: Vec<PacketSocket>,
    opts: EmuOptions,
    epoch: std::time::Instant,
    late_us: Vec<u64>,
    late_max_ns: u64,
    oversize: u64,
    send_errors: u64,
    recv_errors: u64,
    realtime: bool,
    pinned: Option<usize>,
    memory_locked: bool,
    /// CPU times when the emulator started (for the steal share).
    cpu_at_start: Option<CpuTimes>,
    /// The latest time the fabric's models were run to.
    models_at: Instant,
    log: Option<io::BufWriter<std::fs::File>>,
    card: Option<CardBoard>,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator").field("fabric", &self.fabric).field("opts", &self.opts).finish()
    }
}

/// Sets SCHED_FIFO with `prio` on the calling thread.
pub fn set_fifo(prio: i32) -> io::Result<()> {
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: valid sched_param; 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Runs the calling thread on `cpu` only.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no CPU {cpu}")));
    }
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within it (checked above);
    // 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Locks every page the process has and will have into memory.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: plain system call on flags.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The `q`-quantile (µs) of a histogram of 1 µs buckets.
fn percentile(hist: &[u64], q: f64) -> f64 {
    let total: u64 = hist.iter().sum();
    let rank = (total as f64 * q) as u64;
    let mut seen = 0;
    for (us, &n) in hist.iter().enumerate() {
        seen += n;
        if n > 0 && seen > rank {
            return us as f64;
        }
    }
    0.0
}

impl Emulator {
    /// `sockets[i]` must be bound to the interface of `fabric.ports()[i]`.
    pub fn new(fabric: Fabric, sockets: Vec<PacketSocket>, opts: EmuOptions) -> io::Result<Self> {
        if sockets.len() != fabric.ports().len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "one socket per fabric port"));
        }
        let log = match &opts.frame_log {
            Some(p) => Some(io::BufWriter::new(std::fs::File::create(p)?)),
            None => None,
        };
        let card = match &opts.card_file {
            Some(p) if fabric.cards() > 0 => Some(CardBoard::create(p, fabric.cards()).map_err(io::Error::other)?),
            _ => None,
        };
        Ok(Emulator {
            fabric,
            sockets,
            opts,
            epoch: std::time::Instant::now(),
            late_us: vec![0; LATE_BUCKETS],
            late_max_ns: 0,
            oversize: 0,
            send_errors: 0,
            recv_errors: 0,
            realtime: false,
            pinned: None,
            memory_locked: false,
            cpu_at_start: None,
            models_at: Instant::from_nanos(0),
            log,
            card,
        })
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// The model time of a frame the kernel stamped at `realtime_ns`: the stamp moved onto
    /// the monotonic clock, never later than now and never before the last time the models
    /// were run to (they cannot take input in their past).
    fn arrival(&mut self, realtime_ns: Option<u64>) -> Instant {
        let now = self.now();
        let Some(rt) = realtime_ns else { return now };
        let rt_now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        let stamped = Instant::from_nanos(now.as_nanos().saturating_sub(rt_now.saturating_sub(rt)));
        stamped.max(self.models_at).min(now)
    }

    fn log_line(&mut self, now: Instant, ev: &str, port: usize, len: usize, extra: &str) {
        if let Some(l) = &mut self.log {
            let _ = writeln!(
                l,
                "{{\"t_us\":{},\"ev\":\"{ev}\",\"port\":{port},\"len\":{len}{extra}}}",
                now.as_nanos() / 1000
            );
        }
    }

    /// The current status.
    pub fn status(&mut self) -> EmuStatus {
        let now = self.now();
        EmuStatus {
            uptime_s: now.as_nanos() as f64 / 1e9,
            realtime: self.realtime,
            fabric: self.fabric.status(now),
            oversize: self.oversize,
            send_errors: self.send_errors,
            recv_errors: self.recv_errors,
            late_us_p50: percentile(&self.late_us, 0.5),
            late_us_p99: percentile(&self.late_us, 0.99),
            late_us_max: self.late_max_ns as f64 / 1e3,
            steal_share: self
                .cpu_at_start
                .and_then(|a| CpuTimes::read(self.pinned).ok().map(|b| a.steal_share(&b)))
                .unwrap_or(0.0),
            busy_poll: self.opts.busy_poll,
            cpu: self.pinned,
            memory_locked: self.memory_locked,
        }
    }

    /// Reads what is waiting on every socket; returns whether a socket had more than a batch.
    /// An interface that went away (the run was torn down under us) ends the emulator.
    fn receive(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        let mut more = false;
        for port in 0..self.sockets.len() {
            for i in 0.. {
                if i == RX_BATCH {
                    more = true;
                    break;
                }
                match self.sockets[port].recv(buf) {
                    Ok(Some(r)) if r.len > buf.len() => {
                        self.oversize += 1;
                        self.log_line(self.now(), "oversize", port, r.len, "");
                    }
                    Ok(Some(rx)) => {
                        let n = rx.len;
                        let now = self.arrival(rx.realtime_ns);
                        let r = self.fabric.ingress(now, port, &buf[..n]);
                        match r {
                            Ok(()) => self.log_line(now, "in", port, n, ""),
                            Err(e) => {
                                let why = match e {
                                    Refused::Malformed => "malformed",
                                    Refused::NoPort => "no_port",
                                    Refused::QueueFull => "queue_full",
                                };
                                self.log_line(now, why, port, n, "");
                            }
                        }
                    }
                    Ok(None) => break,
                    Err(e) if matches!(e.raw_os_error(), Some(libc::ENETDOWN | libc::ENODEV | libc::ENXIO)) => {
                        return Err(e);
                    }
                    Err(_) => {
                        self.recv_errors += 1;
                        break;
                    }
                }
            }
        }
        Ok(more)
    }

    /// Sends every frame due by now.
    fn deliver(&mut self) {
        loop {
            let now = self.now();
            self.models_at = now;
            let Some((port, frame, due)) = self.fabric.poll_egress(now) else { break };
            if self.sockets[port].send(&frame).is_err() {
                self.send_errors += 1;
            }
            let late = self.now().saturating_duration_since(due).as_nanos() as u64;
            self.late_max_ns = self.late_max_ns.max(late);
            self.late_us[((late / 1000) as usize).min(LATE_BUCKETS - 1)] += 1;
            if self.log.is_some() {
                self.log_line(now, "out", port, frame.len(), &format!(",\"late_us\":{}", late / 1000));
            }
        }
    }

    /// Runs until `ctl.stop` is set, calling `on_status` every [`EmuOptions::status_every`]
    /// and whenever `ctl.want_status` is set.
    pub fn run(&mut self, ctl: &Control, mut on_status: impl FnMut(&EmuStatus)) -> io::Result<()> {
        if let Some(prio) = self.opts.rt_priority {
            match set_fifo(prio) {
                Ok(()) => self.realtime = true,
                Err(e) => tracing::warn!("emulator runs without real-time priority: {e}"),
            }
        }
        if let Some(cpu) = self.opts.cpu {
            match pin_to_cpu(cpu) {
                Ok(()) => self.pinned = Some(cpu),
                Err(e) => tracing::warn!("emulator not pinned to CPU {cpu}: {e}"),
            }
        }
        if self.opts.lock_memory {
            match lock_memory() {
                Ok(()) => self.memory_locked = true,
                Err(e) => tracing::warn!("emulator memory not locked: {e}"),
            }
        }
        self.cpu_at_start = CpuTimes::read(self.pinned).ok();
        let mut poll = Poll::new()?;
        let timer = TimerFd::new()?;
        const TIMER: Token = Token(usize::MAX);
        for (i, s) in self.sockets.iter().enumerate() {
            poll.registry().register(&mut SourceFd(&s.as_raw_fd()), Token(i), Interest::READABLE)?;
        }
        poll.registry().register(&mut SourceFd(&timer.as_raw_fd()), TIMER, Interest::READABLE)?;
        let mut events = Events::with_capacity(64);
        let mut buf = vec![0u8; FRAME_BUF];
        let spin = Duration::from_micros(self.opts.spin_us);
        let mut next_status = std::time::Instant::now();
        let mut last_rest = std::time::Instant::now();
        while !ctl.stop.load(Ordering::Relaxed) {
            // A load first: the flag is read every turn and written only when a trace waits.
            if ctl.traces_waiting.load(Ordering::Relaxed) && ctl.traces_waiting.swap(false, Ordering::Acquire) {
                let traces = std::mem::take(&mut *ctl.traces.lock().unwrap_or_else(|e| e.into_inner()));
                for (link, trace) in traces {
                    let now = self.now();
                    if let Err(e) = self.fabric.play(link, now, trace) {
                        tracing::warn!("link {link} cannot play its trace: {e}");
                    }
                }
            }
            let more = self.receive(&mut buf)?;
            self.deliver();
            if let Some(c) = &self.card {
                self.fabric.take_card_changes(|i, load| c.publish(i, load));
            }
            if ctl.want_status.swap(false, Ordering::Relaxed) || std::time::Instant::now() >= next_status {
                next_status = std::time::Instant::now() + self.opts.status_every;
                let st = self.status();
                on_status(&st);
                if let Some(l) = &mut self.log {
                    l.flush()?;
                }
            }
            if more {
                continue;
            }
            let deadline = self.fabric.poll_timeout();
            let now = self.now();
            if self.opts.busy_poll {
                // Frames that arrive during a rest keep their kernel stamps (see `arrival`),
                // so only deliveries need the rest kept clear of them.
                // Past half a period more without a clear moment the rest is taken anyway
                // (and a delivery it delays is counted late): the throttle's 50 ms would be worse.
                let clear = deadline.is_none_or(|d| d.saturating_duration_since(now) > BUSY_REST + spin);
                let since = last_rest.elapsed();
                if (clear && since >= BUSY_EVERY) || since >= BUSY_EVERY + BUSY_EVERY / 2 {
                    std::thread::sleep(BUSY_REST);
                    last_rest = std::time::Instant::now();
                } else {
                    std::hint::spin_loop();
                }
                continue;
            }
            match deadline {
                Some(d) if d.saturating_duration_since(now) <= spin => {
                    std::hint::spin_loop();
                    continue;
                }
                Some(d) => {
                    let wake = self.epoch + Duration::from_nanos((d.as_nanos()).saturating_sub(spin.as_nanos() as u64));
                    timer.set(Some(wake))?;
                }
                None => timer.set(None)?,
            }
            // Bounded so that stop and status requests are seen within 20 ms.
            let cap = self.opts.status_every.min(Duration::from_millis(20));
            match poll.poll(&mut events, Some(cap)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            timer.acknowledge();
        }
        if let Some(l) = &mut self.log {
            l.flush()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_the_lateness_histogram() {
        let mut h = vec![0u64; LATE_BUCKETS];
        h[10] = 98;
        h[200] = 1;
        h[LATE_BUCKETS - 1] = 1;
        assert_eq!(percentile(&h, 0.5), 10.0);
        assert_eq!(percentile(&h, 0.985), 200.0);
        assert_eq!(percentile(&h, 0.995), (LATE_BUCKETS - 1) as f64);
        assert_eq!(percentile(&[0; 4], 0.5), 0.0);
    }
}
